package config

import (
	"encoding/json"
	"strings"
)

// secretsManagerARN starts the ARN of an AWS Secrets Manager secret, which
// Trident reads SVM credentials from (credentials type awsarn, or an ARN as
// username).
const secretsManagerARN = "arn:aws:secretsmanager:"

// noAWSAPI is what a config that asks for an AWS API call is told.
const noAWSAPI = "ontap-csi calls no AWS API: put the SVM's username and password in a Kubernetes Secret " +
	"and name it in credentials (type secret), or give them in the config"

// aws reads Trident's "aws" section, which every FSx for NetApp ONTAP
// backend carries. An FSx file system is ONTAP: its SVM is reached at
// managementLIF with ONTAP credentials like any other, so that is what is
// used. Trident additionally calls the AWS API with the section (to look
// up the SVM and its management LIF, to read credentials from Secrets
// Manager, to delete volumes that FSx backups hold); ontap-csi does not,
// and says so once.
func (p *parser) aws(cfg *Backend, top map[string]json.RawMessage) {
	if strings.HasPrefix(cfg.Username, secretsManagerARN) {
		p.fail("username", "is an AWS Secrets Manager ARN; %s", noAWSAPI)
	}
	raw, ok := top["aws"]
	if !ok || isNull(raw) {
		return
	}
	m := p.object("aws", raw, awsKeys)
	cfg.AWS = &AWS{
		APIRegion:       strings.TrimSpace(p.str("aws.apiRegion", m["apiRegion"])),
		FSxFilesystemID: strings.TrimSpace(p.str("aws.fsxFilesystemID", m["fsxFilesystemID"])),
		APIKey:          Secret(p.str("aws.apiKey", m["apiKey"])),
		SecretKey:       Secret(p.str("aws.secretKey", m["secretKey"])),
	}
	if id := cfg.AWS.FSxFilesystemID; id != "" && !strings.HasPrefix(id, "fs-") {
		p.fail("aws.fsxFilesystemID", "%q is not an FSx file system ID (fs-...)", id)
	}
	p.warn("aws is accepted for Trident compatibility, but ontap-csi calls no AWS API: the SVM is reached at managementLIF " +
		"with this config's ONTAP credentials, the FSx API is not asked for the SVM or its LIFs, and volumes are deleted " +
		"through ONTAP alone (which refuses to delete a volume an FSx backup still protects)")
}

// fsxHint explains, for a config with an "aws" section, why a key Trident
// can do without is required here.
func fsxHint(top map[string]json.RawMessage) string {
	if raw, ok := top["aws"]; !ok || isNull(raw) {
		return ""
	}
	return " (Trident looks it up in the FSx API from aws.fsxFilesystemID; ontap-csi calls no AWS API: " +
		"take it from `aws fsx describe-storage-virtual-machines`)"
}
