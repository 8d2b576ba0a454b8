// Stand-in for vbom.ml/util, which k8s.io/kubernetes v1.19 requires but the
// module proxy no longer serves (403). Nothing the harness builds imports it.
module vbom.ml/util
