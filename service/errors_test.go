package service_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/minidubbo/minidubbo/service"
)

func TestCodeString(t *testing.T) {
	for code, want := range map[service.Code]string{
		service.CodeUnknown:         "unknown",
		service.CodeInvalidArgument: "invalid argument",
		service.CodeNotFound:        "not found",
		service.CodePanic:           "panic",
		1042:                        "code 1042",
	} {
		assert.Equal(t, want, code.String())
	}
}

func TestErrorMessage(t *testing.T) {
	assert.EqualError(t, service.Errorf(service.CodeNotFound, "no user %d", 7), "error (code 5, not found): no user 7")
	assert.EqualError(t, &service.Error{Code: 1042, Message: "out of stock", Remote: true}, "remote error (code 1042): out of stock")
	err := fmt.Errorf("wrapped: %w", service.Errorf(service.CodeInvalidArgument, "bad"))
	assert.True(t, errors.Is(err, &service.Error{Code: service.CodeInvalidArgument}))
	assert.Equal(t, service.CodeUnknown, service.FromError(errors.New("plain")).Code)
}
