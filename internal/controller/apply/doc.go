// Package apply writes a fleet's owned objects the way the operator must:
// server-side apply under one field owner, skipped when the fields it owns
// already hold the desired values (verified once, then remembered by a
// ledger until the object's managed fields move), create-only when the
// cache has no such object, and never onto an object the fleet does not
// control, which is a NameConflict. Optional kinds (cert-manager's
// Certificate, prometheus-operator's ServiceMonitor) are applied and
// deleted through the RESTMapper, so the operator runs without their CRDs.
package apply
