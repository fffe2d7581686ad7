// Package rigwire is the protocol by which a gateway calls a rig's agent over NATS: the platform never dials a
// rig; the agent holds the NATS connection it opened itself, and every gateway replica reaches every rig through
// it (docs/rig-transport.md).
//
// A call is one HTTP exchange. The gateway (Caller) publishes the request on the rig's call subject,
// events.RigCallRequestSubject(provider, offering), where the agents of that offering share the calls in one
// queue group (events.RigCallQueue), naming its reply subject: events.RigAnswerSubject(provider, offering, caller
// token, call id). Package events builds every subject below; this package writes none of its own.
// One wildcard subscription per Caller receives the answers of all its calls. The agent (Serve) answers on the
// reply subject with numbered messages, strictly in order:
//
//  0. accepted, naming the agent's control subject for this call (below the call subject): with the answer's
//     first message when that comes within 5 ms (a whole answer is then one message), else alone. A rig that is
//     not there is known within AcceptTimeout, and the call fails as a refused connection would; a call given up
//     before a late acceptance is canceled at the rig when the acceptance comes;
//  1. the response's head (status and headers), then body chunks of at most ChunkSize bytes, and an end marker
//     or an error marker; several of these share a message when they are ready together (a whole answer is one
//     message).
//
// Keepalives, unnumbered, go both ways every Keepalive while a call lasts; a side that hears nothing of a call for
// IdleTimeout takes it as broken: the gateway's Body.Read returns an error (a broken upstream), the agent cancels
// the handler's request context. A gap or a duplicate in the numbering is an error too.
//
// Flow control: the gateway declares a window (bytes) in its call; the agent never has more body bytes published
// and not yet acknowledged than that, and the gateway acknowledges, on the call's control subject, as its caller
// reads the Body. A slow client therefore stops the agent, and neither side buffers without bound. A request
// body longer than one chunk goes in numbered chunks to the control subject once the call is accepted; its length
// is declared in the call. The context of Call ending, or its Body closed before its end, sends a cancel.
//
// Subjects below events.RigCallSubject are the rig's to subscribe and the platform's to publish; below
// events.RigReplySubject the rig's to publish (events.RigPermissions): a rig cannot read another's calls nor
// answer them.
package rigwire
