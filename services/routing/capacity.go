package routing

// Capacity is how many requests the offering's rig serves at once, as its last heartbeat to this process said; 0
// when none has arrived. The provider's performance view divides busy time by it.
func (r *Router) Capacity(offeringID string) int {
	r.mu.RLock()
	s := r.offerings[offeringID]
	r.mu.RUnlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeat.Capacity
}
