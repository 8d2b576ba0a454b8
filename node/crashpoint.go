//go:build !crashpoints

package node

// crashpoint marks a step boundary in a multi-step operation (NodeStage,
// NodeUnstage). Normal builds compile it away; test/e2e builds the plugin
// with -tags crashpoints to kill the process at a named step
// (crashpoint_enabled.go).
func crashpoint(string) {}
