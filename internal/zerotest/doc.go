// Package zerotest helps test the machines' "all zero" checks. A key's
// state drops its extra part once the part's empty method says every field
// is zero again; a field that empty forgets to look at would be dropped with
// the rest while it still mattered. EachField makes that a test failure the
// day the field is added, not a protocol bug found later.
package zerotest
