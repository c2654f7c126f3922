//go:build !unix

package credential

import "io/fs"

// fileOwner is unknown where files have no Unix owner (Windows keeps ACLs, which the user
// cache directory's defaults already limit to the user).
func fileOwner(fs.FileInfo) (uid int, known bool) { return 0, false }
