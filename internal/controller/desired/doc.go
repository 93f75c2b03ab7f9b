// Package desired builds, from a Memcached and its resolved spec, the
// objects that run it: the Deployment of memcached pods, the headless
// Service, the PodDisruptionBudget, the NetworkPolicy, the cert-manager
// Certificate and the ServiceMonitor, as apply configurations (or
// unstructured objects for the kinds other projects serve). It also picks
// the pods a scale-down removes. Everything here is pure: it reads no API
// and writes nothing, so it is table-tested.
package desired
