/* pause: the sandbox process of every pod. It holds the pod's namespaces,
 * reaps orphaned children and exits on SIGINT/SIGTERM. Built with
 * `gcc -static` into the testbed's pause image. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }

static void on_chld(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (memcached-operator testbed)");
    return 0;
  }
  if (getpid() != 1)
    fprintf(stderr, "pause: warning: not running as PID 1\n");
  struct sigaction term = {.sa_handler = on_term};
  struct sigaction chld = {.sa_handler = on_chld, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
      sigaction(SIGCHLD, &chld, NULL) < 0)
    return 1;
  for (;;)
    pause();
}
