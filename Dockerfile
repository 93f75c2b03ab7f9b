# The operator image: a static binary on a distroless, non-root base.
# The testbed (make images) builds the same binaries into an OCI archive
# without a container engine; this file is for machines that have one.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

FROM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY internal/ internal/
COPY webhooks/ webhooks/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/...

FROM ${BASE_IMAGE}
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/memcached-operator"]
