package pb

import "errors"

// Errors returned by Encode and Decode, matched with errors.Is. Each names the
// field and the value when it wraps.
var (
	// ErrUnknownMessage is returned by Decode for an envelope whose body is
	// missing or of a kind this version does not know (an empty oneof: a newer
	// sender's body lands in the unknown fields), and by Encode for a nil body
	// or a body type outside package msg's closed set (a pointer included).
	ErrUnknownMessage = errors.New("transport: unknown message kind")

	// ErrUnknownField is returned by Decode when any message in the envelope
	// carries fields this version does not know: a newer sender's message
	// would otherwise be half understood.
	ErrUnknownField = errors.New("transport: unknown field")

	// ErrBadEnum is returned when an enumerated value (a renewal result, a
	// refusal reason) is outside the values this version defines.
	ErrBadEnum = errors.New("transport: enum value out of range")

	// ErrMessageTooLarge is returned when an envelope, or one of its keys,
	// barriers, identifiers or lists, exceeds the bounds in limits.go.
	ErrMessageTooLarge = errors.New("transport: message too large")

	// ErrMalformed is returned by Decode for bytes that are not a protobuf
	// envelope (truncated, wrong wire types, invalid UTF-8 in a string).
	ErrMalformed = errors.New("transport: malformed message")
)
