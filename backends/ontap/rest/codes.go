package rest

// ONTAP error codes the client classifies (docs/design/ontap-rest.md §2.4 global table,
// §3 endpoint tables, §6 classes). ONTAP sends them as strings in error
// bodies and as numbers in jobs; both reach us as these strings.
const (
	// Global codes (any endpoint).
	codeDuplicateEntry   = "1"       // entry with the same identifiers already exists
	codeInvalidField     = "2"       // field invalid or missing, or an extra field
	codeEntryNotFound    = "4"       // "entry doesn't exist"
	codePermissionDenied = "6"       // permission denied (RBAC)
	codeResourceLimit    = "7"       // resource limit exceeded: 429 or 503
	codeResourceInUse    = "8"       // resource in use: 409, or 503 while transient
	codeTooManyRequests  = "262160"  // too many requests being processed; retry shortly
	codeNotAuthorized    = "6691623" // user is not authorized for this operation
	codeUUIDNotFound     = "8586226" // specified UUID not found

	// SVMs.
	codeSVMNotFound = "2621462" // SVM does not exist

	// Volumes.
	codeVolumeDuplicate     = "917526"   // duplicate volume name
	codeVolumeBeingCreated  = "13107405" // another volume with that name is being created
	codeVolumeSizeTooSmall  = "917534"   // size below the minimum
	codeVolumeUUIDNotFound  = "918235"   // no volume with that UUID
	codeJunctionPathInvalid = "918252"   // nas.path invalid
	codeParentNotFound      = "524601"   // FlexClone parent volume not found
	codeVolumeHasClones     = "524615"   // volume has FlexClones and cannot be deleted
	codeVolumeBusy          = "524486"   // volume busy (e.g. while a forced delete offlines it)

	// Snapshots.
	codeSnapshotDuplicate = "525059"  // snapshot name already exists
	codeSnapshotBusy      = "1638555" // snapshot has not expired or is locked: FlexClones depend on it
	codeSnapshotHasOwner  = "1638543" // snapshot has an owner
	codeSnapshotNotFound  = "1638600" // snapshot does not exist

	// NFS export policies and rules.
	codePolicyNameInvalid = "1703952" // export policy name invalid
	codePolicyNotFound    = "1703954" // export policy does not exist
	codePolicyInUse       = "1703945" // export policy in use by a volume
	codePolicyIsDefault   = "1703947" // the "default" policy cannot be deleted
	codePolicyUsedByQtree = "1703953" // export policy in use by a qtree
	codeRuleDuplicate     = "1704070" // rule with the same values exists

	// LUNs.
	codeLUNVolumeNotFound = "917927"  // volume of the LUN path not found
	codeLUNNotFound       = "5374875" // LUN not found
	codeLUNSourceNotFound = "5374876" // LUN clone source not found
	codeLUNExists         = "5374242" // a LUN or NVMe namespace exists at the path
	codeLUNSameName       = "5440688" // same name as an existing LUN
	codeLUNBeingCreated   = "5702832" // LUN with that name being created
	codeLUNPathTaken      = "1254196" // a LUN exists at the new path of a rename
	codeLUNMapped         = "1254197" // LUN is mapped: delete needs allow_delete_while_mapped
	codeLUNShrink         = "5374892" // LUN size cannot be reduced
	codeLUNSameSize       = "1254226" // LUN size patched to its current size
	codeLUNAttrExists     = "5374930" // LUN attribute exists
	codeCopyLimit         = "7018877" // too many LUN copy and move operations; try again later

	// igroups, initiators and LUN maps.
	codeIgroupExists      = "5374023" // igroup with that name exists
	codeIgroupNameInvalid = "5373958" // igroup name invalid
	codeIgroupNotFound    = "5374852" // igroup not found
	codeIgroupMapped      = "1254213" // igroup is mapped to LUNs
	codeInitiatorExists   = "5374035" // initiator already in the igroup
	codeInitiatorNotInIG  = "5374034" // initiator is not a member of the igroup
	codeWWPNInvalid       = "5374038" // Fibre Channel WWPN invalid
	codeInitiatorInvalid  = "5374039" // initiator name invalid
	codeMapLUNNotFound    = "1254201" // LUN of the map does not exist
	codeMapDuplicate      = "1254207" // LUN already mapped to that igroup
	codeMapIgroupNotFound = "5374878" // igroup of the map missing or in another SVM
	codeMapNotFound       = "5374922" // LUN map does not exist
	// codeMapLUNIDInUse: a map's POST asked for a logical_unit_number
	// that the igroup, or one of its initiators through another igroup,
	// already uses. REST documents no code for it; 1254324 ("same LUN ID
	// for multiple LUN maps") is the related one, and the simulator's
	// (docs/design/ontap-rest.md §3.10). A guess: see IsLUNIDTaken's callers
	// for what happens when ONTAP answers another code.
	codeMapLUNIDInUse = "1254324"

	// Qtrees and quotas (docs/design/economy.md §1, §2).
	codeQtreeNotFound            = "5242927" // qtree not found
	codeQtreeNameReserved        = "5242894" // "" is the default qtree
	codeQuotaRuleNotFound        = "5308545" // quota rule UUID invalid
	codeQuotaResizeFailedModify  = "5308567" // rule modified, quota resize failed
	codeQuotaResizeFailedCreate  = "5308568" // rule created, quota resize failed: reinitialize
	codeQuotaResizeSkipped       = "5308571" // rule created, quota resize skipped: reinitialize
	codeLUNCloneDestinationTaken = "1260136" // a LUN clone's destination exists
	codeLUNCloneOtherVolume      = "1260121" // a LUN can be cloned only within its volume
	// codeTooManyLUNs: the volume holds as many LUNs as it may. REST
	// documents no code; this is ZAPI's EVDISK_ERROR_TOO_MANY_LUNS, the
	// one Trident knows (the simulator uses it).
	codeTooManyLUNs = "9158"

	// iSCSI credentials.
	codeCredentialNotFound = "5374895" // iSCSI security credential does not exist
	codeCredentialExists   = "5374142" // iSCSI security credential exists for the initiator
)

// codeClasses are the classes of specific codes. They win over the ranges
// below and over the HTTP status (docs/design/ontap-rest.md §6).
var codeClasses = map[string]Class{
	codeEntryNotFound: ClassNotFound, codeUUIDNotFound: ClassNotFound, codeSVMNotFound: ClassNotFound,
	codeVolumeUUIDNotFound: ClassNotFound, codeParentNotFound: ClassNotFound, codeSnapshotNotFound: ClassNotFound,
	codePolicyNotFound: ClassNotFound, codeLUNVolumeNotFound: ClassNotFound, codeLUNNotFound: ClassNotFound,
	codeLUNSourceNotFound: ClassNotFound, codeIgroupNotFound: ClassNotFound, codeInitiatorNotInIG: ClassNotFound,
	codeMapLUNNotFound: ClassNotFound, codeMapIgroupNotFound: ClassNotFound, codeMapNotFound: ClassNotFound,
	codeCredentialNotFound: ClassNotFound, codeQtreeNotFound: ClassNotFound, codeQuotaRuleNotFound: ClassNotFound,

	codeDuplicateEntry: ClassAlreadyExists, codeVolumeDuplicate: ClassAlreadyExists,
	codeVolumeBeingCreated: ClassAlreadyExists, codeSnapshotDuplicate: ClassAlreadyExists,
	codeRuleDuplicate: ClassAlreadyExists, codeLUNExists: ClassAlreadyExists, codeLUNSameName: ClassAlreadyExists,
	codeLUNBeingCreated: ClassAlreadyExists, codeLUNPathTaken: ClassAlreadyExists, codeLUNAttrExists: ClassAlreadyExists,
	codeIgroupExists: ClassAlreadyExists, codeInitiatorExists: ClassAlreadyExists, codeMapDuplicate: ClassAlreadyExists,
	codeCredentialExists: ClassAlreadyExists, codeLUNCloneDestinationTaken: ClassAlreadyExists,

	codeResourceInUse: ClassInUse, codeVolumeHasClones: ClassInUse, codeVolumeBusy: ClassInUse,
	codeSnapshotBusy: ClassInUse, codeSnapshotHasOwner: ClassInUse, codePolicyInUse: ClassInUse,
	codePolicyIsDefault: ClassInUse, codePolicyUsedByQtree: ClassInUse, codeLUNMapped: ClassInUse,
	codeIgroupMapped: ClassInUse, codeCopyLimit: ClassInUse, codeMapLUNIDInUse: ClassInUse,

	codeInvalidField: ClassInvalid, codeVolumeSizeTooSmall: ClassInvalid, codeJunctionPathInvalid: ClassInvalid,
	codePolicyNameInvalid: ClassInvalid, codeLUNShrink: ClassInvalid, codeLUNSameSize: ClassInvalid,
	codeIgroupNameInvalid: ClassInvalid, codeWWPNInvalid: ClassInvalid, codeInitiatorInvalid: ClassInvalid,
	codeQtreeNameReserved: ClassInvalid, codeLUNCloneOtherVolume: ClassInvalid,

	codeResourceLimit: ClassThrottled, codeTooManyRequests: ClassThrottled,

	codePermissionDenied: ClassAuth, codeNotAuthorized: ClassAuth,
}

// codeRanges are families of codes ONTAP documents as one kind of error.
var codeRanges = []struct {
	lo, hi int64
	class  Class
}{
	{262177, 262286, ClassInvalid},   // common argument and field errors
	{917886, 917888, ClassInvalid},   // volume name rules
	{1704036, 1704065, ClassInvalid}, // export rule clientmatch format
	{5373969, 5373993, ClassInvalid}, // initiator name format
	{5374121, 5374130, ClassInvalid}, // LUN name and size
	{5374145, 5374150, ClassInvalid}, // CHAP settings
}
