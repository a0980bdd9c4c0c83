package ovirtsim

import (
	"testing"

	. "github.com/onsi/gomega"
)

// The engine reports the hosts filtered out in the iteration order of a
// java.util.HashMap keyed by the host's Guid (SchedulingResult.filteredOutReasons).
func TestJavaHashMapOrderOfGuids(t *testing.T) {
	g := NewWithT(t)
	// UUID.hashCode is (int)(hilo >> 32) ^ (int)hilo with hilo = most ^ least;
	// HashMap.hash then XORs the upper 16 bits into the lower ones.
	g.Expect(javaHash("00000000-0000-0000-0000-000000000002")).To(Equal(uint32(2)))
	g.Expect(javaHash("00000000-0000-0001-0000-000000000000")).To(Equal(uint32(1)), "from the most significant half")
	g.Expect(javaHash("00000001-0000-0000-0000-000000000000")).To(Equal(uint32(1)), "from its upper word")
	g.Expect(javaHash("00000000-0000-0000-0000-000000010000")).To(Equal(uint32(0x10001)), "spread by h ^ h>>>16")
	g.Expect(javaHash("ffffffff-ffff-ffff-0000-000000000000")).To(Equal(uint32(0)))

	ids := []string{"00000000-0000-0000-0000-00000000000f", "00000000-0000-0000-0000-000000010000",
		"00000000-0000-0000-0000-000000000002", "00000000-0000-0001-0000-000000000000"}
	// Buckets of a 16-slot table: 15, 1, 2, 1; a bucket keeps insertion order.
	g.Expect(javaHashMapOrder(ids)).To(Equal([]int{1, 3, 2, 0}))

	// 13 keys make the table grow to 32 slots: 0x1f and 0x0f no longer share a bucket.
	var many []string
	for _, suffix := range []string{"1f", "0f", "01", "02", "03", "04", "05", "06", "07", "08", "09", "0a", "0b"} {
		many = append(many, "00000000-0000-0000-0000-0000000000"+suffix)
	}
	order := javaHashMapOrder(many)
	g.Expect(order[len(order)-1]).To(Equal(0), "0x1f is the last bucket of 32")
	g.Expect(order[len(order)-2]).To(Equal(1), "0x0f comes before it")
}

// ErrorTranslatorImpl.resolveMessages: "$name value" lines define variables,
// the first definition wins, ${...} inside a value is resolved too, and the
// REST detail is the list's toString.
func TestEngineFaultTranslatesLikeTheEngine(t *testing.T) {
	g := NewWithT(t)
	e := engineFault("VAR__ACTION__RUN", "VAR__TYPE__VM", "SCHEDULING_ALL_HOSTS_FILTERED_OUT",
		"VAR__FILTERTYPE__INTERNAL", "$hostName a", "$filterName VmAffinityGroups",
		"$affinityRules ", "VAR__DETAIL__AFFINITY_FAILED_NEGATIVE", "SCHEDULING_HOST_FILTERED_REASON_WITH_DETAIL",
		"VAR__FILTERTYPE__INTERNAL", "$hostName b", "$filterName Memory",
		"$availableMem 100", "VAR__DETAIL__NOT_ENOUGH_MEMORY", "SCHEDULING_HOST_FILTERED_REASON_WITH_DETAIL")
	g.Expect(e.status).To(Equal(409))
	g.Expect(e.detail).To(Equal("[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, " +
		"The host a did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules ., " +
		"The host a did not satisfy internal filter VmAffinityGroups because it matched negative affinity rules .]"))

	e = engineFault("VAR__ACTION__RUN", "VAR__TYPE__VM", "SCHEDULING_NO_HOSTS")
	g.Expect(e.status).To(Equal(400), "no message with an error type: BAD_REQUEST")
	g.Expect(e.detail).To(Equal("[There are no hosts to use. Check that the cluster contains at least one host in Up state.]"))

	e = engineFault("VAR__TYPE__AFFINITY_GROUP", "VAR__ACTION__ADD", "must not be null",
		"ACTION_TYPE_FAILED_ATTRIBUTE_PATH", "$path affinityGroup.name", "SOME_UNKNOWN_KEY")
	g.Expect(e.status).To(Equal(400))
	g.Expect(e.detail).To(Equal("[must not be null, Attribute: affinityGroup.name, some unknown key]"))
}
