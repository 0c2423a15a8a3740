//go:build !e2e

package console_test

import (
	"os"
	"testing"

	"github.com/moziplus/mozi/repository/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
