module github.com/ontap-csi/ontap-csi/test/kubelet/harness

go 1.26.0
