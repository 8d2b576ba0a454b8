package main

import (
	"fmt"
	"runtime"

	"github.com/ontap-csi/ontap-csi/server"
)

func init() { subcommands["version"] = runVersion }

func runVersion(args []string) int {
	if len(args) > 0 {
		fmt.Println("usage: ontap-csi version")
		return 2
	}
	fmt.Printf("ontap-csi %s (%s, %s/%s)\n", server.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
