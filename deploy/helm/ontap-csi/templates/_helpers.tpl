{{/* The ontap-csi image. */}}
{{- define "ontap-csi.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels of every object; call with (list $ "component") or (list $ ""). */}}
{{- define "ontap-csi.labels" -}}
app.kubernetes.io/name: ontap-csi
{{- with index . 1 }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* The kubelet plugin dir of the driver. */}}
{{- define "ontap-csi.pluginDir" -}}
{{ .Values.kubeletDir }}/plugins/csi.trident.netapp.io
{{- end }}

{{/*
One controller sidecar with Trident 26.06's arguments; call with
(dict "root" $ "name" "csi-provisioner" "spec" .Values.sidecars.provisioner "workersFlag" "--worker-threads"),
and "args" (a list) for arguments of that sidecar's own, "extraArgs" for
those of an opt-in, and "podEnv" true for NAMESPACE and POD_NAME from the
downward API (csi-provisioner's --enable-capacity finds its owner by them).
*/}}
{{- define "ontap-csi.sidecar" -}}
- name: {{ .name }}
  image: {{ .spec.image }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args:
    - --v={{ .root.Values.sidecars.logLevel }}
    - --csi-address=$(ADDRESS)
    - {{ .workersFlag }}=25
    - --timeout=600s
    - --retry-interval-start=10s
    - --retry-interval-max=300s
    - --kube-api-qps=25.0
    - --kube-api-burst=50
    {{- range .args }}
    - {{ . }}
    {{- end }}
    {{- if gt (int .root.Values.controller.replicas) 1 }}
    - --leader-election
    {{- end }}
    {{- range .extraArgs }}
    - {{ . }}
    {{- end }}
  env:
    - name: ADDRESS
      value: /var/lib/csi/sockets/pluginproxy/csi.sock
    {{- if .podEnv }}
    - name: NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- end }}
  resources:
    {{- toYaml .spec.resources | nindent 4 }}
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    - name: socket-dir
      mountPath: /var/lib/csi/sockets/pluginproxy/
{{- end }}
