package routing

import (
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/metering"
)

// onMetered records the metered requests of a message of the meter's feed (events.MeteredSubject) as their rigs
// reported them (ObserveUsage), each request once. A malformed message is ignored.
func (r *Router) onMetered(msg *nats.Msg) {
	metered, err := metering.DecodeFeed(msg.Data)
	if err != nil {
		r.log.Debug("routing: malformed message of the meter's feed ignored", "subject", msg.Subject, "error", err)
		return
	}
	for i := range metered {
		r.ObserveUsage(metered[i].Usage, metered[i].At)
	}
}
