// Package apply writes a fleet's owned objects the way the operator must:
// server-side apply under one field owner, skipped when the fields it owns
// already hold the desired values (compared as digests: the cache keeps one
// of what was applied in place of the managed fields), create-only when the
// cache has no such object, and never onto an object the fleet does not
// control, which is a NameConflict. Optional kinds (cert-manager's
// Certificate, prometheus-operator's ServiceMonitor) are applied and
// deleted through the RESTMapper, so the operator runs without their CRDs.
package apply
