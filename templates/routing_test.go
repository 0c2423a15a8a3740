package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository"
)

func TestRouteBusinessType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		labels []string
		want   repository.BusinessType
	}{
		{nil, repository.BusinessFeature},
		{[]string{"priority/P0"}, repository.BusinessFeature},
		{[]string{"type/feat", "priority/P1"}, repository.BusinessFeature},
		{[]string{"type/impl"}, repository.BusinessImpl},
		{[]string{"priority/P0", "type/bug"}, repository.BusinessBug},
		{[]string{"type/docs"}, repository.BusinessDocs},
		{[]string{"type/refactor"}, repository.BusinessRefactor},
		{[]string{"Type/Test"}, repository.BusinessTest},
		{[]string{"type/bug", "type/infrastructure"}, repository.BusinessInfrastructure},
		{[]string{"area/Infrastructure-CI"}, repository.BusinessInfrastructure},
		{[]string{"type/test", "type/feat"}, repository.BusinessFeature},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RouteBusinessType(tt.labels), "%v", tt.labels)
	}
}
