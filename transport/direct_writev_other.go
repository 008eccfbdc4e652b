//go:build unix && !linux

package transport

// writev writes what the socket takes now of the frames, one write per
// frame, stopping at the first the socket does not take whole, and
// returns how many bytes it took. Only the goroutine that set
// Conn.writing uses it.
func (d *directWrite) writev(frames []*Buffer) (int, error) {
	total := 0
	for _, f := range frames {
		n, err := d.write(f.B)
		total += n
		if err != nil || n < len(f.B) {
			return total, err
		}
	}
	return total, nil
}

// writeBufs is writev for a batch's pieces, one write per piece.
func (d *directWrite) writeBufs(bufs [][]byte) (int, error) {
	total := 0
	for _, p := range bufs {
		n, err := d.write(p)
		total += n
		if err != nil || n < len(p) {
			return total, err
		}
	}
	return total, nil
}

func (d *directWrite) vfn() func(uintptr) bool { return nil }

func (d *directWrite) afn() func(uintptr) bool { return nil }
