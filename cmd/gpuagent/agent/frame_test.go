package agent

import eventstream "github.com/gpumarket/gpumarket/services/sse"

// The agent reads an event's data line and event line through package sse (Frame.Data, Frame.Event); the tests
// that hold it to the cases it must read (TestDataPayloadFindsTheSingleDataLine, TestEventNameIsTheEventLines)
// call them by these names.

func dataPayload(frame []byte) (from, to int, ok bool) { return eventstream.Frame(frame).Data() }

func eventName(frame []byte) string { return string(eventstream.Frame(frame).Event()) }
