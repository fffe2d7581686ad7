package rigauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

const (
	// firstAnswerWait is how long Disconnect waits for the first server's answer, and quietWait how long after the
	// latest one for another: the servers answer within milliseconds of one another, and a rig's connections must be
	// closed within a second in all.
	firstAnswerWait = 500 * time.Millisecond
	quietWait       = 100 * time.Millisecond
	// connzLimit is the most connections of one user a server lists at once; a rig holds one or two.
	connzLimit = 4096
)

// Revoker closes users' connections on every server of a NATS cluster, or the one embedded server, through the
// system account: it asks every server for the user's connections and has each close its own. It is how a rig's
// re-issued credential, its delisting and its shut-out take effect at once on connections already open; the auth
// callout refuses the reconnection.
type Revoker struct {
	// NC is a connection of a user of the system account.
	NC *nats.Conn
}

// connzAnswer is the part of a server's answer to the connections request that Disconnect reads
// (server.ServerAPIResponse with a server.Connz).
type connzAnswer struct {
	Server struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"server"`
	Data struct {
		Conns []struct {
			CID uint64 `json:"cid"`
		} `json:"connections"`
	} `json:"data"`
	Error *struct {
		Description string `json:"description"`
	} `json:"error"`
}

// Disconnect closes every connection of the user on every server and returns how many it closed.
func (r *Revoker) Disconnect(ctx context.Context, username string) (closed int, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("rigauth: disconnect %s: %w", username, err)
		}
	}()
	inbox := r.NC.NewRespInbox()
	sub, err := r.NC.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(map[string]any{"user": username, "limit": connzLimit})
	if err := r.NC.PublishRequest(events.ConnzPingSubject, inbox, body); err != nil {
		return 0, err
	}
	var errs []error
	for wait := firstAnswerWait; ; wait = quietWait {
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
			} else if wait == firstAnswerWait {
				errs = append(errs, errors.New("no server answered the connections request (is this a system account user?)"))
			}
			break
		}
		var a connzAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil {
			errs = append(errs, fmt.Errorf("a server's connections: %w", err))
			continue
		}
		if a.Error != nil {
			errs = append(errs, fmt.Errorf("server %s: %s", a.Server.Name, a.Error.Description))
			continue
		}
		for _, c := range a.Data.Conns {
			if err := r.kick(ctx, a.Server.ID, c.CID); err != nil {
				errs = append(errs, fmt.Errorf("server %s: %w", a.Server.Name, err))
				continue
			}
			closed++
		}
	}
	return closed, errors.Join(errs...)
}

// kick has one server close one of its connections.
func (r *Revoker) kick(ctx context.Context, serverID string, cid uint64) error {
	body, _ := json.Marshal(map[string]uint64{"cid": cid})
	ctx, cancel := context.WithTimeout(ctx, firstAnswerWait)
	defer cancel()
	m, err := r.NC.RequestWithContext(ctx, events.KickSubject(serverID), body)
	if err != nil {
		return fmt.Errorf("close connection %d: %w", cid, err)
	}
	var a connzAnswer
	if err := json.Unmarshal(m.Data, &a); err == nil && a.Error != nil {
		return fmt.Errorf("close connection %d: %s", cid, a.Error.Description)
	}
	return nil
}
