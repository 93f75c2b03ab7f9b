package memcached

// NameConflictError exposes the conflict error to the package's tests.
var NameConflictError = nameConflict
