// Package image builds octogate's container image: an OCI image index (amd64, arm64) whose
// images are one layer holding the static octogate binary on an empty base, with no shell,
// a numeric non-root user and OCI labels. It speaks the OCI image format through
// go-containerregistry (https://github.com/opencontainers/image-spec) and needs no container
// daemon.
//
// The build is reproducible: the binary is built with -trimpath and without VCS stamping, the
// tar entries are sorted and carry one fixed time (SOURCE_DATE_EPOCH, the commit time in `make
// image`), and the config's creation time is that same time, so the same source and Go
// toolchain give the same index digest.
// Source: https://reproducible-builds.org/docs/source-date-epoch/
package image
