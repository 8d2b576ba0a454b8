# syntax=docker/dockerfile:1
# Multi-stage build of a static ontap-csi. The image carries only the binary:
# host tools (mount, mkfs, iscsiadm, multipath, ...) are reached through
# --host-root, so they always match the host's kernel and configuration.
FROM golang:1.26.8-bookworm AS build
ARG VERSION=dev
# trident-operator accepts only an image that reports its own Trident release.
ARG TRIDENT_VERSION=26.06.0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY server/ server/
COPY registration/ registration/
COPY node/ node/
COPY controller/ controller/
COPY backends/ backends/
COPY nodeinfo/ nodeinfo/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/ontap-csi/ontap-csi/server.Version=${VERSION} -X main.tridentVersion=${TRIDENT_VERSION}" \
      -o /out/ontap-csi ./cmd/ontap-csi \
 && ln -s ontap-csi /out/trident_orchestrator \
 && mkdir -p /out/bin && ln -s ../ontap-csi /out/bin/tridentctl

FROM scratch
COPY --from=build /out/ /
# TLS to ONTAP is verified against the system roots unless a backend sets
# trustedCACertificate, so the image needs them.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
# Trident's DaemonSet and Deployment run /trident_orchestrator; the
# operator's controller probes exec tridentctl (/bin/tridentctl).
ENTRYPOINT ["/ontap-csi"]
