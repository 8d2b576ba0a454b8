package ontapsim

// Methods and latency classes of the route table, short so that a route
// stays one line.
const (
	get, post, patch, del = "GET", "POST", "PATCH", "DELETE"
	req, mut              = latRequest, latSyncMutation
)

// buildRoutes lists every endpoint of docs/design/ontap-rest.md §3 the simulator
// serves. Templates are what Stats and fault rules use.
func (s *Simulator) buildRoutes() []*route {
	s.routes = nil
	s.clusterRoutes()
	s.volumeRoutes()
	s.exportPolicyRoutes()
	s.lunRoutes()
	s.igroupRoutes()
	s.lunMapRoutes()
	s.iscsiRoutes()
	s.qtreeRoutes()
	s.quotaRoutes()
	s.qosRoutes()
	s.cgRoutes()
	return s.routes
}

func (s *Simulator) clusterRoutes() {
	s.add(get, "/api/cluster", req, s.getCluster)
	s.add(get, "/api/cluster/nodes", req, s.getNodes)
	s.add(get, "/api/cluster/nodes/{uuid}", req, s.getNode)
	s.add(get, "/api/cluster/jobs", req, s.getJobs)
	s.add(get, "/api/cluster/jobs/{uuid}", req, s.getJob)
	s.add(get, "/api/svm/svms", req, s.getSVMs)
	s.add(get, "/api/svm/svms/{uuid}", req, s.getSVM)
	s.add(get, "/api/storage/aggregates", req, s.getAggregates)
	s.add(get, "/api/storage/aggregates/{uuid}", req, s.getAggregate)
	s.add(get, "/api/network/ip/interfaces", req, s.getLIFs)
	s.add(get, "/api/network/ip/interfaces/{uuid}", req, s.getLIF)
	s.add(get, "/api/storage/snapshot-policies", req, s.getSnapshotPolicies)
	s.add(get, "/api/snapmirror/relationships", req, s.getSnapmirror)
	s.add(post, "/api/support/ems/application-logs", mut, s.postEMS)
}

// volumeRoutes are the volumes' and their snapshots'.
func (s *Simulator) volumeRoutes() {
	vol := withResource(volumeResource)
	s.add(get, "/api/storage/volumes", req, s.getVolumes)
	s.add(post, "/api/storage/volumes", req, s.postVolume, async, vol)
	s.add(get, "/api/storage/volumes/{uuid}", req, s.getVolume)
	s.add(patch, "/api/storage/volumes/{uuid}", req, s.patchVolume, async, vol,
		withParams("restore_to.snapshot.name", "restore_to.snapshot.uuid", "preserve_lun_ids"))
	s.add(del, "/api/storage/volumes/{uuid}", req, s.deleteVolume, async, vol, withParams("force"))
	s.add(post, "/api/application/containers", req, s.postContainer, async, vol)

	snap := withResource(snapshotResource)
	s.add(get, "/api/storage/volumes/{volume.uuid}/snapshots", req, s.getSnapshots)
	s.add(post, "/api/storage/volumes/{volume.uuid}/snapshots", req, s.postSnapshot, async, snap)
	s.add(get, "/api/storage/volumes/{volume.uuid}/snapshots/{uuid}", req, s.getSnapshot)
	s.add(patch, "/api/storage/volumes/{volume.uuid}/snapshots/{uuid}", req, s.patchSnapshot, async, snap)
	s.add(del, "/api/storage/volumes/{volume.uuid}/snapshots/{uuid}", req, s.deleteSnapshot, async, snap)
}

func (s *Simulator) exportPolicyRoutes() {
	pol, rule := withResource(policyResource), withResource(ruleResource)
	s.add(get, "/api/protocols/nfs/export-policies", req, s.getPolicies)
	s.add(post, "/api/protocols/nfs/export-policies", mut, s.postPolicy, pol)
	s.add(get, "/api/protocols/nfs/export-policies/{id}", req, s.getPolicy)
	s.add(patch, "/api/protocols/nfs/export-policies/{id}", mut, s.patchPolicy, pol)
	s.add(del, "/api/protocols/nfs/export-policies/{id}", mut, s.deletePolicy, pol)
	s.add(get, "/api/protocols/nfs/export-policies/{policy.id}/rules", req, s.getRules)
	s.add(post, "/api/protocols/nfs/export-policies/{policy.id}/rules", mut, s.postRule, rule)
	s.add(get, "/api/protocols/nfs/export-policies/{policy.id}/rules/{index}", req, s.getRule)
	s.add(patch, "/api/protocols/nfs/export-policies/{policy.id}/rules/{index}", mut, s.patchRule, rule, withParams("new_index"))
	s.add(del, "/api/protocols/nfs/export-policies/{policy.id}/rules/{index}", mut, s.deleteRule, rule)
}

// lunRoutes are the LUNs' and their attributes'.
func (s *Simulator) lunRoutes() {
	lun := withResource(lunResource)
	s.add(get, "/api/storage/luns", req, s.getLUNs)
	s.add(post, "/api/storage/luns", latLUNCreate, s.postLUN, async, lun)
	s.add(get, "/api/storage/luns/{uuid}", req, s.getLUN)
	s.add(patch, "/api/storage/luns/{uuid}", mut, s.patchLUN, async, lun)
	s.add(del, "/api/storage/luns/{uuid}", mut, s.deleteLUN, async, lun, withParams("allow_delete_while_mapped"))
	attr := withResource(lunAttrResource)
	s.add(get, "/api/storage/luns/{lun.uuid}/attributes", req, s.getLUNAttrs)
	s.add(post, "/api/storage/luns/{lun.uuid}/attributes", mut, s.postLUNAttr, attr)
	s.add(get, "/api/storage/luns/{lun.uuid}/attributes/{name}", req, s.getLUNAttr)
	s.add(patch, "/api/storage/luns/{lun.uuid}/attributes/{name}", mut, s.patchLUNAttr, attr)
	s.add(del, "/api/storage/luns/{lun.uuid}/attributes/{name}", mut, s.deleteLUNAttr, attr)
}

// igroupRoutes are the igroups' and their initiators'.
func (s *Simulator) igroupRoutes() {
	ig, in := withResource(igroupResource), withResource(initiatorResource)
	s.add(get, "/api/protocols/san/igroups", req, s.getIgroups)
	s.add(post, "/api/protocols/san/igroups", mut, s.postIgroup, ig)
	s.add(get, "/api/protocols/san/igroups/{uuid}", req, s.getIgroup)
	s.add(patch, "/api/protocols/san/igroups/{uuid}", mut, s.patchIgroup, ig)
	s.add(del, "/api/protocols/san/igroups/{uuid}", mut, s.deleteIgroup, ig, withParams("allow_delete_while_mapped"))
	s.add(get, "/api/protocols/san/igroups/{igroup.uuid}/initiators", req, s.getInitiators)
	s.add(post, "/api/protocols/san/igroups/{igroup.uuid}/initiators", mut, s.postInitiators, in)
	s.add(get, "/api/protocols/san/igroups/{igroup.uuid}/initiators/{name}", req, s.getInitiator)
	s.add(del, "/api/protocols/san/igroups/{igroup.uuid}/initiators/{name}", mut, s.deleteInitiator, in, withParams("allow_delete_while_mapped"))
}

// lunMapRoutes are the LUN maps' and their reporting nodes'.
func (s *Simulator) lunMapRoutes() {
	lm, rn := withResource(lunMapResource), withResource(reportingNodeResource)
	s.add(get, "/api/protocols/san/lun-maps", req, s.getLunMaps)
	s.add(post, "/api/protocols/san/lun-maps", mut, s.postLunMap, lm,
		withParams("additional_reporting_node.name", "additional_reporting_node.uuid"))
	s.add(get, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}", req, s.getLunMap)
	s.add(del, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}", mut, s.deleteLunMap, lm)
	s.add(get, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}/reporting-nodes", req, s.getReportingNodes)
	s.add(post, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}/reporting-nodes", mut, s.postReportingNode, rn)
	s.add(get, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}/reporting-nodes/{uuid}", req, s.getReportingNode)
	s.add(del, "/api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}/reporting-nodes/{uuid}", mut, s.deleteReportingNode, rn)
}

// iscsiRoutes are the iSCSI service's and the CHAP credentials'.
func (s *Simulator) iscsiRoutes() {
	cred := withResource(credentialResource)
	s.add(get, "/api/protocols/san/iscsi/services", req, s.getISCSIServices)
	s.add(get, "/api/protocols/san/iscsi/services/{svm.uuid}", req, s.getISCSIService)
	s.add(patch, "/api/protocols/san/iscsi/services/{svm.uuid}", mut, s.patchISCSIService, withResource(iscsiServiceResource))
	s.add(get, "/api/protocols/san/iscsi/credentials", req, s.getCredentials)
	s.add(post, "/api/protocols/san/iscsi/credentials", mut, s.postCredential, cred)
	s.add(get, "/api/protocols/san/iscsi/credentials/{svm.uuid}/{initiator}", req, s.getCredential)
	s.add(patch, "/api/protocols/san/iscsi/credentials/{svm.uuid}/{initiator}", mut, s.patchCredential, cred)
	s.add(del, "/api/protocols/san/iscsi/credentials/{svm.uuid}/{initiator}", mut, s.deleteCredential, cred)
}
