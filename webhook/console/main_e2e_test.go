//go:build e2e

package console_test

import (
	"os"
	"testing"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/pgtest"
)

func TestMain(m *testing.M) {
	realgitea.Prepare()
	code := pgtest.Main(m)
	realgitea.StopShared()
	os.Exit(code)
}
