package memcached

// CountsBacklog reports whether the started controller gave r its queue to
// count the fleets waiting for a worker.
func CountsBacklog(r *Reconciler) bool { return r.writer().backlog.Load() != nil }
