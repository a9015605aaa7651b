# skillreg container image: a static binary on an empty base.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t skillreg .
#   docker run --rm -p 8080:8080 -v skillreg-data:/data skillreg
#
# The build is `make build`'s: CGO_ENABLED=0, -trimpath and the same
# ldflags (deploy/deploy_test.go checks them against the Makefile). .git is
# not sent to the build, so pass VERSION as above or the binary says "dev".
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so editing the source does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/skillreg ./cmd/skillreg \
 && mkdir -m 0700 /out/data

# No shell, no package manager, no git: go-git speaks https itself. Only
# file:// sources need a git binary, and they make no sense in a container.
FROM scratch
# crypto/x509 reads this file first on Linux: https sources and the GitHub API.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# A name for the numeric user, for tools that look it up; the user owns /data.
COPY deploy/docker/passwd /etc/passwd
COPY deploy/docker/group /etc/group
COPY deploy/docker/config.yaml /etc/skillreg/config.yaml
COPY --from=build /out/skillreg /skillreg
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# skillreg.db (bbolt) and git/ (object stores): one daemon per volume.
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/skillreg"]
CMD ["serve", "--config", "/etc/skillreg/config.yaml", "--listen", "0.0.0.0:8080", "--data", "/data"]
