// Package status computes a fleet's status from what one pass observed
// (Observation in, status and conditions out), reads what the fleet's pods
// and EndpointSlices say, classifies a pass's errors into condition
// reasons, and says which changes are worth an event. It is pure: it reads
// no API and writes nothing, so it is table-tested.
package status
