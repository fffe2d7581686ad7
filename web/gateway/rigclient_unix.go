//go:build unix

package gateway

import (
	"errors"
	"syscall"
)

// alive is true when an idle connection is still open: nothing arrived on it while it was idle
// (on a TLS connection, anything but its end: a TLS 1.3 server sends session tickets after the
// handshake), and the agent did not close it. It peeks without waiting, so it costs one system
// call and never reads what a later response would need.
func (pc *rigConn) alive() bool {
	sc, ok := pc.tcp.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var one [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0:
			open = pc.secure
		case n == 0 && err == nil: // the agent closed it
		default:
			open = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		}
		return true
	})
	return err == nil && open
}
