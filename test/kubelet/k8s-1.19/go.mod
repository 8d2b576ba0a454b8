module github.com/ontap-csi/ontap-csi/test/kubelet/k8s-1.19

go 1.26.0

require (
	github.com/ontap-csi/ontap-csi/test/kubelet/harness v0.0.0
	google.golang.org/grpc v1.27.0
	k8s.io/api v0.19.16
	k8s.io/apimachinery v0.19.16
	k8s.io/client-go v0.19.16
	k8s.io/klog/v2 v2.2.0
	k8s.io/kubelet v0.0.0
	k8s.io/kubernetes v1.19.16
)

require (
	github.com/Microsoft/go-winio v0.4.15-0.20190919025122-fc70bd9a86b5 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver v3.5.0+incompatible // indirect
	github.com/cespare/xxhash/v2 v2.1.1 // indirect
	github.com/container-storage-interface/spec v1.2.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/docker/distribution v2.7.1+incompatible // indirect
	github.com/docker/spdystream v0.0.0-20160310174837-449fdfce4d96 // indirect
	github.com/evanphx/json-patch v4.9.0+incompatible // indirect
	github.com/fsnotify/fsnotify v1.4.9 // indirect
	github.com/go-logr/logr v0.2.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/groupcache v0.0.0-20191227052852-215e87163ea7 // indirect
	github.com/golang/protobuf v1.4.2 // indirect
	github.com/google/go-cmp v0.4.0 // indirect
	github.com/google/gofuzz v1.1.0 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/googleapis/gnostic v0.4.1 // indirect
	github.com/hashicorp/golang-lru v0.5.1 // indirect
	github.com/json-iterator/go v1.1.10 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.2-0.20181231171920-c182affec369 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.1 // indirect
	github.com/opencontainers/go-digest v1.0.0-rc1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/prometheus/client_golang v1.7.1 // indirect
	github.com/prometheus/client_model v0.2.0 // indirect
	github.com/prometheus/common v0.10.0 // indirect
	github.com/prometheus/procfs v0.1.3 // indirect
	github.com/spf13/afero v1.2.2 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	github.com/stretchr/objx v0.2.0 // indirect
	github.com/stretchr/testify v1.4.0 // indirect
	golang.org/x/crypto v0.0.0-20200622213623-75b288015ac9 // indirect
	golang.org/x/net v0.0.0-20201110031124-69a78807bb2b // indirect
	golang.org/x/oauth2 v0.0.0-20191202225959-858c2ad4c8b6 // indirect
	golang.org/x/sys v0.0.0-20201112073958-5cba982894dd // indirect
	golang.org/x/text v0.3.3 // indirect
	golang.org/x/time v0.0.0-20191024005414-555d28b269f0 // indirect
	google.golang.org/appengine v1.6.5 // indirect
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013 // indirect
	google.golang.org/protobuf v1.24.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/yaml.v2 v2.2.8 // indirect
	k8s.io/apiserver v0.19.16 // indirect
	k8s.io/cloud-provider v0.19.16 // indirect
	k8s.io/component-base v0.19.16 // indirect
	k8s.io/cri-api v0.0.0 // indirect
	k8s.io/csi-translation-lib v0.19.16 // indirect
	k8s.io/kube-openapi v0.0.0-20200805222855-6aeccd4b50c6 // indirect
	k8s.io/utils v0.0.0-20200729134348-d5654de09c73 // indirect
	sigs.k8s.io/structured-merge-diff/v4 v4.1.2 // indirect
	sigs.k8s.io/yaml v1.2.0 // indirect
)

replace github.com/ontap-csi/ontap-csi/test/kubelet/harness => ../harness

// The proxy answers 403 for vbom.ml/util; k8s.io/kubernetes v1.19 only needs
// its go.mod to resolve.
replace vbom.ml/util => ./stub/vbom.ml/util

// k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
// with ./staging paths. Map each to its published v0.19.16 (generated from the
// replace block of k8s.io/kubernetes v1.19.16's go.mod).
replace (
	k8s.io/api => k8s.io/api v0.19.16
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.19.16
	k8s.io/apimachinery => k8s.io/apimachinery v0.19.16
	k8s.io/apiserver => k8s.io/apiserver v0.19.16
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.19.16
	k8s.io/client-go => k8s.io/client-go v0.19.16
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.19.16
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.19.16
	k8s.io/code-generator => k8s.io/code-generator v0.19.16
	k8s.io/component-base => k8s.io/component-base v0.19.16
	k8s.io/controller-manager => k8s.io/controller-manager v0.19.16
	k8s.io/cri-api => k8s.io/cri-api v0.19.16
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.19.16
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.19.16
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.19.16
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.19.16
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.19.16
	k8s.io/kubectl => k8s.io/kubectl v0.19.16
	k8s.io/kubelet => k8s.io/kubelet v0.19.16
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.19.16
	k8s.io/metrics => k8s.io/metrics v0.19.16
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.19.16
	k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.19.16
	k8s.io/sample-controller => k8s.io/sample-controller v0.19.16
)
