// Command tridentcerts writes Trident's trident-csi certificates (package
// tridentcerts) into a directory, one file per key of the trident-csi
// Secret, for tests outside this module: test/cluster puts them into the
// Secret that its Trident-shaped objects mount at /certs. Tests only.
package main

import (
	"fmt"
	"os"

	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tridentcerts <directory>")
		os.Exit(2)
	}
	if _, err := tridentcerts.Write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "tridentcerts:", err)
		os.Exit(1)
	}
}
