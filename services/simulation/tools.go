package simulation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Tool calls. A chat request that offers tools, whose tool_choice is not "none" and whose last
// message is not a tool's result, is answered with one call of a tool instead of text: the
// function tool_choice names, else the first tool. Its arguments are a JSON object that gives
// each required property of the tool's parameters a placeholder by its type (placeholder). The
// arguments are the answer's output: their tokens by CountTokens are its completion tokens,
// streamed one token a frame on the profile's schedule like text, and cut at the request's
// token limit (finish reason "length"). A request whose last message is a tool's result is
// answered with text, as a model answers once it has what it called for.

// toolToCall returns the tool a chat request is answered with a call of, or ok false when it is
// answered with text; err is what is wrong with its tools or tool_choice, for a 400 on param.
func toolToCall(req chatRequest) (tool *chatTool, ok bool, param string, err error) {
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, false, fmt.Sprintf("tools[%d]", i),
				errors.New(`each tool must be {"type": "function", "function": {"name": ...}}: this server calls functions only`)
		}
	}
	choice, named, err := readToolChoice(req.ToolChoice)
	if err != nil {
		return nil, false, "tool_choice", err
	}
	if len(req.Tools) == 0 {
		if named != "" || choice == "required" {
			return nil, false, "tool_choice", errors.New("tool_choice asks for a tool call, but the request offers no tools")
		}
		return nil, false, "", nil
	}
	if choice == "none" || req.Messages[len(req.Messages)-1].Role == "tool" {
		return nil, false, "", nil
	}
	if named == "" {
		return &req.Tools[0], true, "", nil
	}
	for i := range req.Tools {
		if req.Tools[i].Function.Name == named {
			return &req.Tools[i], true, "", nil
		}
	}
	return nil, false, "tool_choice", fmt.Errorf("tool_choice names the function %q, which is not among the tools", named)
}

// readToolChoice reads tool_choice: absent or null is "auto"; a string is "none", "auto" or
// "required"; an object {"type": "function", "function": {"name": N}} names the function N.
// Any other object (allowed_tools, a custom tool) counts as "auto".
func readToolChoice(raw json.RawMessage) (choice, named string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "auto", "", nil
	}
	if err := json.Unmarshal(raw, &choice); err == nil {
		switch choice {
		case "none", "auto", "required":
			return choice, "", nil
		}
		return "", "", fmt.Errorf(`tool_choice %q must be "none", "auto", "required" or an object naming a function`, choice)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", "", errors.New(`tool_choice must be "none", "auto", "required" or an object naming a function`)
	}
	if obj.Type == "function" {
		if obj.Function.Name == "" {
			return "", "", errors.New("tool_choice of type function must name the function")
		}
		return "required", obj.Function.Name, nil
	}
	return "auto", "", nil
}

// placeholderArguments is the arguments of a call of a function with the JSON Schema
// parameters: an object with each of its required properties, in the order required lists them,
// given a placeholder by the property's type: "example" for a string, 1 for a number or an
// integer, true for a boolean, [] for an array, {} for an object, null for a property without
// a type (of a list of types, the first that is not "null"). Without required properties it is
// {}. It is written without white space.
func placeholderArguments(parameters json.RawMessage) string {
	var schema struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if len(parameters) > 0 && json.Unmarshal(parameters, &schema) != nil {
		return "{}" // not an object schema: no properties to fill
	}
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for _, name := range schema.Required {
		if seen[name] {
			continue
		}
		seen[name] = true
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		b.Write(key)
		b.WriteByte(':')
		b.WriteString(placeholder(schema.Properties[name].Type))
	}
	b.WriteByte('}')
	return b.String()
}

// placeholder is the value of a property of a JSON Schema type.
func placeholder(typ json.RawMessage) string {
	var types []string
	var one string
	if json.Unmarshal(typ, &one) == nil {
		types = []string{one}
	} else {
		_ = json.Unmarshal(typ, &types)
	}
	for _, t := range types {
		switch t {
		case "string":
			return `"example"`
		case "number", "integer":
			return "1"
		case "boolean":
			return "true"
		case "array":
			return "[]"
		case "object":
			return "{}"
		}
	}
	return "null"
}

// tokenPieces splits a text into its tokens by CountTokens, each with the white space that
// follows it (the first also with any that leads): the pieces of a text that has a token
// concatenate to it, and each counts one token.
func tokenPieces(s string) []string {
	var pieces []string
	start, inWord := 0, false
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord && i > 0 && strings.TrimSpace(s[start:i]) != "" {
				pieces = append(pieces, s[start:i])
				start = i
			}
			inWord = true
		case unicode.IsSpace(r):
			inWord = false
		default:
			if i > 0 && strings.TrimSpace(s[start:i]) != "" {
				pieces = append(pieces, s[start:i])
				start = i
			}
			inWord = false
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		pieces = append(pieces, s[start:])
	}
	return pieces
}

// pieceSource hands out fixed pieces of text one at a time, as textGen hands out words.
type pieceSource struct {
	pieces []string
	i      int
}

func (p *pieceSource) next() string {
	if p.i >= len(p.pieces) {
		return ""
	}
	p.i++
	return p.pieces[p.i-1]
}
