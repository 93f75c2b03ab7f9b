// Package policy holds the rules a Memcached must follow, as pure functions:
// the defaults the mutating webhook fills in and the controller assumes when
// the webhook is off, and the validation the validating webhook enforces.
// Keeping them here, apart from the admission plumbing, lets both callers
// share one definition and lets table tests cover every rule without a server.
package policy
