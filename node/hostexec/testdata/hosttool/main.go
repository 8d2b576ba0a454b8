// hosttool is a static program the hostexec tests install into a fake host
// root: it prints its working directory and the marker file it can see, so a
// test can tell whether it ran inside the chroot.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		fmt.Fprintln(os.Stderr, "asked to fail")
		os.Exit(3)
	}
	b, err := os.ReadFile("/marker")
	if err != nil {
		fmt.Println("no marker")
		return
	}
	fmt.Print(string(b))
}
