package pgserver

import (
	"os"
	"os/user"
	"strconv"
	"sync"
	"syscall"
)

// nobodyID is the uid and gid used when the system has no user "nobody".
const nobodyID = 65534

var (
	runOnce          sync.Once
	runUID, runGID   int
	runAsOtherThanMe bool
)

// runUser returns the user that initdb and postgres run as: the user "nobody" (uid and gid 65534 when there is
// none) when this process runs as root, which PostgreSQL refuses; this process's user otherwise. switched
// reports the first case.
func runUser() (uid, gid int, switched bool) {
	runOnce.Do(func() {
		if os.Geteuid() != 0 {
			runUID, runGID = os.Geteuid(), os.Getegid()
			return
		}
		runUID, runGID, runAsOtherThanMe = nobodyID, nobodyID, true
		if u, err := user.Lookup("nobody"); err == nil {
			uid, err1 := strconv.Atoi(u.Uid)
			gid, err2 := strconv.Atoi(u.Gid)
			if err1 == nil && err2 == nil && uid != 0 && gid != 0 {
				runUID, runGID = uid, gid
			}
		}
	})
	return runUID, runGID, runAsOtherThanMe
}

// sysProcAttr returns the attributes that start a child as the run user: with its uid and gid and no
// supplementary groups when it is not this process's user.
func sysProcAttr() *syscall.SysProcAttr {
	uid, gid, switched := runUser()
	if !switched {
		return &syscall.SysProcAttr{}
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
}

// chownRun gives path (not following a symlink) to the run user when that is not this process's user.
func chownRun(path string) error {
	uid, gid, switched := runUser()
	if !switched {
		return nil
	}
	return os.Lchown(path, uid, gid)
}

// searchable reports whether the run user may search (traverse) a directory with the given mode and owner.
func searchable(mode os.FileMode, sys any) bool {
	uid, gid, _ := runUser()
	if st, ok := sys.(*syscall.Stat_t); ok {
		switch {
		case int(st.Uid) == uid:
			return mode&0o100 != 0
		case int(st.Gid) == gid:
			return mode&0o010 != 0
		}
	}
	return mode&0o001 != 0
}
