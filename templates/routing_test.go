package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

func TestRouteBusinessType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		labels []string
		want   task.BusinessType
	}{
		{nil, task.BusinessFeature},
		{[]string{"priority/P0"}, task.BusinessFeature},
		{[]string{"type/feat", "priority/P1"}, task.BusinessFeature},
		{[]string{"type/impl"}, task.BusinessImpl},
		{[]string{"priority/P0", "type/bug"}, task.BusinessBug},
		{[]string{"type/docs"}, task.BusinessDocs},
		{[]string{"type/refactor"}, task.BusinessRefactor},
		{[]string{"Type/Test"}, task.BusinessTest},
		{[]string{"type/bug", "type/infrastructure"}, task.BusinessInfrastructure},
		{[]string{"area/Infrastructure-CI"}, task.BusinessInfrastructure},
		{[]string{"type/test", "type/feat"}, task.BusinessFeature},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RouteBusinessType(tt.labels), "%v", tt.labels)
	}
}
