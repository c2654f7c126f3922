package krew

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"time"
)

// ArchiveFile is one file of an archive: its name in the archive, mode bits and content.
type ArchiveFile struct {
	Name string
	Mode int64
	Data []byte
}

// WriteArchive writes files as a gzip-compressed tar to w, in the order given, owned by uid and
// gid 0 and dated mtime (SOURCE_DATE_EPOCH for a reproducible release): the same files give
// the same bytes.
func WriteArchive(w io.Writer, files []ArchiveFile, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Mode:     f.Mode,
			Size:     int64(len(f.Data)),
			ModTime:  mtime.UTC(),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("archive %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("archive %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
