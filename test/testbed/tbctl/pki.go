package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// runPKI writes a fresh PKI for one throw-away cluster: a cluster CA, a
// front-proxy CA, the apiserver's serving certificate, one client
// certificate per component and per node, the service-account key, and
// kubeconfigs; with -registry-ip, the registry's serving certificate.
func runPKI(args []string) error {
	fs := flag.NewFlagSet("pki", flag.ExitOnError)
	dir := fs.String("dir", "", "output folder")
	node := fs.String("node-name", "testbed", "node name (kubelet identity) of node 1: kubelet.kubeconfig")
	extra := fs.String("extra-nodes", "", "comma-separated names of the other nodes: kubelet-<name>.kubeconfig each")
	nodeIP := fs.String("node-ip", "", "node address inside the network namespace")
	serviceIP := fs.String("service-ip", "10.96.0.1", "ClusterIP of the kubernetes Service")
	internal := fs.String("internal-server", "", "apiserver URL inside the namespace (components)")
	external := fs.String("external-server", "", "apiserver URL on the host's loopback (admin kubeconfig)")
	registryIP := fs.String("registry-ip", "", "with REGISTRY=1: the registry's address, for its serving certificate (registry.crt)")
	_ = fs.Parse(args)
	if *dir == "" || *nodeIP == "" || *internal == "" || *external == "" {
		return fmt.Errorf("-dir, -node-ip, -internal-server and -external-server are required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("testbed-ca")
	if err != nil {
		return err
	}
	fca, err := newCA("testbed-front-proxy-ca")
	if err != nil {
		return err
	}
	write := func(name string, kp *keyPair) error {
		if err := writePEM(filepath.Join(*dir, name+".crt"), "CERTIFICATE", kp.cert.Raw); err != nil {
			return err
		}
		der, err := x509.MarshalPKCS8PrivateKey(kp.key)
		if err != nil {
			return err
		}
		return writePEM(filepath.Join(*dir, name+".key"), "PRIVATE KEY", der)
	}
	if err := write("ca", ca); err != nil {
		return err
	}
	if err := write("front-proxy-ca", fca); err != nil {
		return err
	}
	serving, err := issue(ca, "kube-apiserver", nil,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		[]net.IP{net.ParseIP(*nodeIP), net.ParseIP(*serviceIP), net.ParseIP("127.0.0.1")}, true)
	if err != nil {
		return err
	}
	if err := write("apiserver", serving); err != nil {
		return err
	}
	if *registryIP != "" {
		ip := net.ParseIP(*registryIP)
		if ip == nil {
			return fmt.Errorf("-registry-ip %q is not an IP address", *registryIP)
		}
		reg, err := issue(ca, "testbed-registry", nil, nil, []net.IP{ip}, true)
		if err != nil {
			return err
		}
		if err := write("registry", reg); err != nil {
			return err
		}
	}
	fpc, err := issue(fca, "front-proxy-client", nil, nil, nil, false)
	if err != nil {
		return err
	}
	if err := write("front-proxy-client", fpc); err != nil {
		return err
	}
	kc, err := issue(ca, "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil, false)
	if err != nil {
		return err
	}
	if err := write("apiserver-kubelet-client", kc); err != nil {
		return err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(*dir, "sa.key"), "PRIVATE KEY", saDER); err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(*dir, "sa.pub"), "PUBLIC KEY", pubDER); err != nil {
		return err
	}

	type client struct {
		file, cn, server string
		groups           []string
	}
	clients := []client{
		{"admin", "testbed-admin", *external, []string{"system:masters"}},
		{"admin-internal", "testbed-admin", *internal, []string{"system:masters"}},
		{"controller-manager", "system:kube-controller-manager", *internal, nil},
		{"scheduler", "system:kube-scheduler", *internal, nil},
		{"kubelet", "system:node:" + *node, *internal, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", *internal, nil},
		{"coredns", "system:coredns", *internal, nil},
		{"kube-network-policies", "system:kube-network-policies", *internal, nil},
	}
	// NodeRestriction lets a kubelet touch only its own Node and pods: every
	// node has a client certificate of its own.
	for _, n := range strings.Split(*extra, ",") {
		if n = strings.TrimSpace(n); n != "" {
			clients = append(clients, client{"kubelet-" + n, "system:node:" + n, *internal, []string{"system:nodes"}})
		}
	}
	for _, c := range clients {
		kp, err := issue(ca, c.cn, c.groups, nil, nil, false)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(*dir, c.file+".kubeconfig"), c.server, ca, kp); err != nil {
			return err
		}
	}
	return nil
}

func newCA(cn string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func issue(ca *keyPair, cn string, orgs, dns []string, ips []net.IP, server bool) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKubeconfig(path, server string, ca, client *keyPair) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(client.key)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}),
	}
	cfg.AuthInfos["testbed"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: client.cert.Raw}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: "testbed"}
	cfg.CurrentContext = "testbed"
	return clientcmd.WriteToFile(*cfg, path)
}
