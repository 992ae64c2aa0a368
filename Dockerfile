# Builds any pattern with a Docker engine: docker build --build-arg PATTERN=mirror -t kpatterns/mirror:dev .
# The same layout as `go tool task image PATTERN=mirror`, which needs no Docker engine. The bases
# are build arguments, for a machine that takes them from a mirror of its own; GOPROXY and GOSUMDB
# too (`go tool task image:docker` sets all four on a machine that reaches no registry).
ARG BUILDER_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot
FROM ${BUILDER_IMAGE} AS build
ARG PATTERN
ARG GOPROXY
ARG GOSUMDB
WORKDIR /src
COPY . .
RUN test -n "${PATTERN}" || { echo "set --build-arg PATTERN=<pattern directory>"; exit 1; }
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd "${PATTERN}" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="-s -w" -o /out/manager .

FROM ${BASE_IMAGE}
ARG PATTERN
ARG REVISION=unknown
ARG VERSION=dev
LABEL org.opencontainers.image.source=https://github.com/kpatterns/kpatterns \
      org.opencontainers.image.revision=${REVISION} org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.title=${PATTERN}
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
CMD ["run"]
