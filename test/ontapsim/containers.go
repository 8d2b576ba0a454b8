package ontapsim

// containerPostFields are what a container create with one FlexVol may
// carry: the SVM, and the volume without aggregates (ONTAP places it).
var containerPostFields = newSchema(`svm.name svm.uuid volumes.name volumes.space.size
	volumes.space.snapshot.reserve_percent volumes.guarantee.type volumes.snapshot_policy.name
	volumes.snapshot_directory_access_enabled volumes.nas.path volumes.nas.security_style
	volumes.nas.unix_permissions volumes.nas.export_policy.name volumes.comment volumes.encryption.enabled
	volumes.tiering.policy volumes.qos.policy.name volumes.type volumes.scale_out volumes.exclude_aggregates.name`)

// postContainer is POST /api/application/containers (ONTAP 9.19.1+), the
// create that lets ONTAP place a volume: Trident's useBalancedPlacement.
// ONTAP balances new volumes over the SVM's aggregates; the simulator puts
// the one FlexVol it supports on the aggregate with the most free space.
func (s *Simulator) postContainer(c *call) (*reply, *apiError) {
	if !s.cfg.versionAtLeast(9, 19, 1) {
		return nil, errNotFound(codeNotFound, "", "API not found: /api/application/containers")
	}
	if err := c.checkBody(containerPostFields, nil); err != nil {
		return nil, err
	}
	svm, err := c.resolveSVM(c.body, true)
	if err != nil {
		return nil, err
	}
	vols, _ := c.body.objects("volumes")
	if c.body.err != nil {
		return nil, c.body.err
	}
	if len(vols) != 1 {
		return nil, errInvalid(codeNotSupported, "volumes", "The simulator creates exactly one volume per container; %d given.", len(vols))
	}
	v := vols[0]
	if scale, ok := v.boolean("scale_out"); ok && scale {
		return nil, errInvalid(codeNotSupported, "volumes.scale_out", "FlexGroup volumes are not supported by the simulator.")
	}
	aggr := s.balancedAggregate(svm)
	if aggr == nil {
		return nil, errInvalid(codeNeedAggregates, "svm", "SVM %q has no aggregate with free space.", svm.Name)
	}
	spec, err := parseVolumeSpec(&bodyReader{m: flexVolBody(v.m, aggr.Name)}, svm)
	if err != nil {
		return nil, err
	}
	return s.startVolumeCreate(c, svm, spec.Name, spec, nil)
}

// flexVolBody turns a container's volume into the body of a volume create
// on aggr: space.size is the volume's size; the container-only fields go.
func flexVolBody(v map[string]any, aggr string) map[string]any {
	out := map[string]any{"aggregates": []any{map[string]any{"name": aggr}}}
	for k, val := range v {
		switch k {
		case "scale_out", "exclude_aggregates":
		case "space":
			space, _ := val.(map[string]any)
			rest := map[string]any{}
			for sk, sv := range space {
				if sk == "size" {
					out["size"] = sv
				} else {
					rest[sk] = sv
				}
			}
			if len(rest) > 0 {
				out["space"] = rest
			}
		default:
			out[k] = val
		}
	}
	return out
}

// balancedAggregate is the aggregate of svm with the most free space;
// nil if it has none.
func (s *Simulator) balancedAggregate(svm *svmState) *aggrState {
	u := s.newUsage()
	var best *aggrState
	for _, id := range svm.Aggregates {
		a := s.m.aggr(id)
		if a == nil {
			continue
		}
		if best == nil || u.aggrAvailable(a) > u.aggrAvailable(best) ||
			u.aggrAvailable(a) == u.aggrAvailable(best) && a.Name < best.Name {
			best = a
		}
	}
	return best
}
