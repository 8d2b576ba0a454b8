package server

// Version is the ontap-csi release, set at build time with
// -ldflags "-X github.com/ontap-csi/ontap-csi/server.Version=...".
var Version = "0.1.0-dev"
