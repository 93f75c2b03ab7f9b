// Package queue ranks and gathers the controller's work: the passes that
// only follow what a pass did (an owned object's creation or update, a
// rollout's bursts) wait behind the fleets whose spec changed, and updates
// within Settle of each other cost one pass.
package queue
