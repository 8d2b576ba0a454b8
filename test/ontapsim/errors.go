package ontapsim

import (
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an ONTAP error: the HTTP status of a synchronous failure plus
// the body {"error":{"message","code","target"}}. The same value describes a
// job failure, whose integer code is Code parsed (docs/design/ontap-rest.md §2.4, §2.5).
type apiError struct {
	Status  int
	Code    string
	Message string
	Target  string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (code %s)", e.Message, e.Code) }

// jobCode is the integer form used in job objects.
func (e *apiError) jobCode() int {
	n, _ := strconv.Atoi(e.Code)
	return n
}

func newError(status int, code int, target, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: strconv.Itoa(code), Message: fmt.Sprintf(format, args...), Target: target}
}

func errInvalid(code int, target, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, code, target, format, args...)
}

func errNotFound(code int, target, format string, args ...any) *apiError {
	return newError(http.StatusNotFound, code, target, format, args...)
}

func errConflict(code int, target, format string, args ...any) *apiError {
	return newError(http.StatusConflict, code, target, format, args...)
}

// ONTAP error codes the simulator returns. Numbers come from docs/design/ontap-rest.md
// (§2.4 global table, §3 endpoint tables); where the reference documents no
// code the choice is noted.
const (
	codeDuplicate          = 1
	codeInvalidField       = 2
	codeNotSupported       = 3
	codeNotFound           = 4
	codePermissionDenied   = 6
	codeResourceLimit      = 7
	codeInUse              = 8
	codeTooManyRequests    = 262160
	codeMissingValue       = 262177
	codeUnexpectedArgument = 262179
	codeInvalidValue       = 262197
	codeNoPatchValues      = 262190
	codeCannotSetField     = 262196
	codeBodyNotAllowed     = 262198
	codeInvalidJSON        = 262199
	codeInvalidJSONType    = 262200
	codeNoFilterOnPOST     = 262211
	codeMissingRequired    = 262212
	codeBadBraces          = 262286
	codeInvalidURL         = 39387137
	codeJobFailed          = 460770 // generic volume job failure; also used for "not enough space in aggregate"
	codeSVMNotFound        = 2621462
	codeSVMMismatch        = 2621706
	codeSVMMissing         = 2621707

	// Volumes.
	codeVolDuplicate       = 917526
	codeVolBeingCreated    = 13107405
	codeVolSizeTooSmall    = 917534
	codeVolNameTooLong     = 917886
	codeVolNameFirstChar   = 917887
	codeVolNameInvalid     = 917888
	codeAggrNotFound       = 917508
	codeNeedAggregates     = 787140
	codeSnapPolicyNotFound = 917551
	codeReserveTooLarge    = 917835
	codeJunctionInvalid    = 918252
	codeExportPolicyBad    = 918271
	codeParentVolNotFound  = 524601
	codeCloneFailed        = 524597
	codeCloneBadValue      = 918247
	codeVolHasClones       = 524615
	codeVolIsSVMRoot       = 917531
	codeVolNotOnline       = 9437885

	// Snapshots.
	codeSnapDuplicate   = 525059
	codeSnapMax         = 525062
	codeSnapVolOffline  = 524479
	codeSnapNameInvalid = 1638518
	codeSnapBusy        = 1638555
	codeSnapNotFound    = 1638600

	// Export policies and rules.
	codePolicyNameInvalid  = 1703952
	codePolicyNameTooLong  = 1704047
	codePolicyInUse        = 1703945
	codePolicyIsDefault    = 1703947
	codePolicyNotFound     = 1703954
	codeRuleDuplicate      = 1704070
	codeClientMatchInvalid = 1704036
	codeClientMatchDup     = 1704050
	codeRuleIndexZero      = 3277162
	codeRuleIndexMax       = 3277163

	// LUNs.
	codeLUNVolNotFound   = 917927
	codeLUNNameChars     = 5374121
	codeLUNSizeNegative  = 5374123
	codeLUNSizeTooSmall  = 5374124
	codeLUNSizeTooLarge  = 5374125
	codeLUNNameInvalid   = 5374127
	codeLUNNameTooLong   = 5376462
	codeLUNInSVMRoot     = 5374237
	codeLUNExists        = 5374242
	codeLUNMissingProp   = 5374884
	codeLUNCloneProp     = 5374883
	codeLUNNotFound      = 5374875
	codeLUNCloneSource   = 5374876
	codeLUNCloneOtherVol = 1260121
	codeLUNVolOffline    = 5374866
	codeLUNSameSize      = 1254226
	codeLUNShrink        = 5374892
	codeLUNRenameExists  = 1254196
	codeLUNMapped        = 1254197
	codeLUNAttrExists    = 5374930
	codeLUNAttrName      = 5374928
	codeLUNAttrTooLong   = 5374929
	// No documented code for "not enough space in the volume" on LUN
	// create/resize; ONTAP's CLI says "not enough space"; we reuse the
	// generic job-failure code with that text.
	codeLUNNoSpace = codeJobFailed

	// igroups, initiators, LUN maps, reporting nodes.
	codeIgroupExists        = 5374023
	codeIgroupNameInvalid   = 5373958
	codeInitiatorInvalid    = 5374039
	codeInitiatorOSConflict = 5374732
	codeIgroupNotFound      = 5374852
	codeIgroupMapped        = 1254213
	codeInitiatorExists     = 5374035
	codeInitiatorNone       = 5374033
	codeInitiatorNotMember  = 5374034
	codeInitiatorSameLUN    = 1254193
	codeInitiatorSameLUNID  = 1254324
	codeMapLUNNotFound      = 1254201
	codeMapDuplicate        = 1254207
	codeMapNoLUN            = 5374901
	codeMapNoIgroup         = 5374902
	codeMapNoISCSILIF       = 5374581
	codeMapIgroupOtherSVM   = 5374878
	codeMapNotFound         = 5374922
	// A LUN ID already used in the igroup (or seen by one of its initiators)
	// has no documented REST code (docs/design/ontap-rest.md §3.10); 1254324 is the
	// related "same LUN ID for multiple LUN maps" code.
	codeMapLUNIDInUse = codeInitiatorSameLUNID

	// Qtrees and quotas (docs/design/economy.md §1, §2). Guesses: a
	// duplicate qtree, a volume at its qtree limit and an offline volume
	// fail with the generic "Failed to create qtree"; a quota rule for a
	// missing qtree with the LUN endpoint's "qtree was not found"; a
	// duplicate rule with the global "entry exists" (1).
	codeQtreeReadOnly      = 5242881
	codeQtreeCreateFailed  = 5242886
	codeQtreeNameReserved  = 5242894
	codeQtreeNoName        = 5242953
	codeQtreeNotFound      = 5242927
	codeQtreeBadValue      = 262245
	codeQtreeNoVolume      = 918232
	codeQtreeBadPolicy     = codePolicyNotFound
	codePolicyUsedByQtree  = 1703953
	codeQuotaRuleNotFound  = 5308545
	codeQuotaNeedsQtree    = 5308564
	codeQuotaResizeFailed  = 5308568
	codeQuotaResizeSkipped = 5308571
	codeQuotaOutOfRange    = 5308574
	// A volume holding the most LUNs it may: ZAPI's EVDISK_ERROR_TOO_MANY_LUNS
	// (Trident's only "too many LUNs" code); REST documents none.
	codeTooManyLUNs = 9158

	// iSCSI service and CHAP.
	codeISCSINoService      = 5374078
	codeChapPasswordsEqual  = 5374147
	codeChapInboundRequired = 5374149
	codeChapOutboundPass    = 5374150
	codeChapHexOdd          = 5374145
	codeChapWithNone        = 5374900
	codeChapNotFound        = 5374895
	codeChapExists          = 5374142
)

// statusForCode maps a job failure code to the HTTP status used when the
// failure is returned synchronously (return_timeout elapsed with the job
// finished). The mapping follows the client classes of docs/design/ontap-rest.md §6.
func statusForCode(code int) int {
	switch code {
	case codeNotFound, codeLUNVolNotFound, codeParentVolNotFound, codeLUNNotFound, codeLUNCloneSource,
		codeIgroupNotFound, codeMapIgroupOtherSVM, codeMapNotFound, codeMapLUNNotFound, codeSnapNotFound,
		codePolicyNotFound, codeSVMNotFound, codeChapNotFound, codeAggrNotFound, codeQtreeNotFound,
		codeQuotaRuleNotFound:
		return http.StatusNotFound
	case codeDuplicate, codeVolDuplicate, codeVolBeingCreated, codeIgroupExists, codeLUNExists,
		codeSnapDuplicate, codeRuleDuplicate, codeMapDuplicate, codeInitiatorExists, codeLUNAttrExists,
		codeChapExists, codeLUNRenameExists,
		codeInUse, codeLUNMapped, codeIgroupMapped, codePolicyInUse, codePolicyIsDefault, codeVolHasClones,
		codeSnapBusy, 524486, codePolicyUsedByQtree:
		return http.StatusConflict
	case codePermissionDenied:
		return http.StatusForbidden
	case codeTooManyRequests:
		return http.StatusTooManyRequests
	case codeResourceLimit:
		return http.StatusServiceUnavailable
	case codeJobFailed, 65541, 65552, 65562, 262145, codeQuotaResizeFailed:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// knownJobMessages gives fault-injected job failures a realistic message.
var knownJobMessages = map[int]string{
	codeVolDuplicate:    "Duplicate volume name.",
	codeVolBeingCreated: "Another volume with the same name is being created.",
	codeVolSizeTooSmall: "Size is too small. Minimum size is 20MB (20971520B).",
	524486:              "Volume busy. Retry the operation later.",
	codeSnapBusy:        "The specified snapshot has not expired or is locked.",
	codeJobFailed:       "Job failed.",
	codeNotFound:        "entry doesn't exist",
}

func injectedJobError(code int) *apiError {
	msg, ok := knownJobMessages[code]
	if !ok {
		msg = fmt.Sprintf("Injected failure (code %d).", code)
	}
	return &apiError{Status: statusForCode(code), Code: strconv.Itoa(code), Message: msg}
}
