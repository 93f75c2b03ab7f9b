package crdupgrade

// Roots is roots, for the tests.
var Roots = roots
