package transport

import "syscall"

// maxIov bounds the buffers of one writev (the kernel's IOV_MAX).
const maxIov = 1024

// writev writes what the socket takes now of the frames, with one writev
// that does not wait for room, and returns how many bytes it took; a full
// socket is not an error. Only the goroutine that set Conn.writing uses it.
func (d *directWrite) writev(frames []*Buffer) (int, error) {
	if len(frames) == 1 {
		return d.write(frames[0].B)
	}
	iov := d.iov[:0]
	for _, f := range frames[:min(len(frames), maxIov)] {
		if len(f.B) == 0 {
			continue
		}
		v := syscall.Iovec{Base: &f.B[0]}
		v.SetLen(len(f.B))
		iov = append(iov, v)
	}
	return d.writeIov(iov)
}

// writeBufs is writev for a batch's pieces: what the socket takes now of
// bufs (of its first maxIov pieces), with one writev that does not wait.
func (d *directWrite) writeBufs(bufs [][]byte) (int, error) {
	iov := d.iov[:0]
	for _, p := range bufs[:min(len(bufs), maxIov)] {
		if len(p) == 0 {
			continue
		}
		v := syscall.Iovec{Base: &p[0]}
		v.SetLen(len(p))
		iov = append(iov, v)
	}
	return d.writeIov(iov)
}

// writeIov writes iov (d.iov's array) with one writev that does not wait.
func (d *directWrite) writeIov(iov []syscall.Iovec) (int, error) {
	d.iov = iov
	if len(iov) == 0 {
		return 0, nil
	}
	err := d.raw.Write(d.fnv)
	n, werr := d.n, d.err
	clear(d.iov)
	d.err = nil
	if err != nil {
		return 0, err
	}
	if werr != nil && werr != syscall.EAGAIN {
		return n, werr
	}
	return n, nil
}

func (d *directWrite) oncev(fd uintptr) bool {
	for {
		r, e := rawWritev(fd, d.iov)
		if e == syscall.EINTR {
			continue
		}
		d.n, d.err = r, nil
		if e != 0 {
			d.n, d.err = 0, e
		}
		return true // done, whatever the socket took
	}
}

func (d *directWrite) vfn() func(uintptr) bool { return d.oncev }

func (d *directWrite) afn() func(uintptr) bool { return d.writeAll }
