package ovirtsim

import (
	"regexp"
	"strings"
	"unicode/utf16"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

// VM custom properties (Vm.custom_properties), as the Engine validates and stores them:
//   - the REST layer turns the <custom_property> list into one string "name=value;name=value;"
//     (restapi CustomPropertiesParser.parse(List): a property without a name or a value is
//     skipped), which replaces the template's (VmMapper.map(VmTemplate) copies the template's
//     custom properties; VmBaseMapper maps the request's only when <custom_properties> is given);
//   - on 4.5, AddVmCommand/UpdateVmCommand.init remove the deprecated mdev_type property (it
//     becomes a vGPU device, MDevTypesUtils) after splitting the string on ';' and '=' (a part
//     without '=' throws: a value or name containing ';' makes the command fail to build);
//   - VmPropertiesUtils.validateVmProperties checks the string's syntax (VALIDATION_STR), then
//     every name against the cluster level's PredefinedVMProperties and UserDefinedVMProperties
//     ("name=regex;..." configuration values) and every value against its regex (Java
//     String.matches: the whole value);
//   - the VM's properties are stored split into predefined and user-defined ones, each rebuilt
//     from a java.util.HashMap (separateCustomPropertiesToUserAndPredefined), and answered as
//     predefined + ";" + user-defined (VmBaseDao), so the Engine answers them in HashMap order.

// The Engine's default PredefinedVMProperties (packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql)
// for the highest cluster level of each engine version: 4.6 on ovirt-engine-4.4.10 (mdev_type is
// still a property there), 4.7 on ovirt-engine-4.5.5 (mdev_type was removed in 4.5.0.1, commit
// f49a1b90d0a "config: Remove mdev_type regexps"). UserDefinedVMProperties is empty by default.
const (
	predefinedVMProperties44 = `sap_agent=^(true|false)$;sndbuf=^[0-9]+$;` +
		`vhost=^(([a-zA-Z0-9_-]*):(true|false))(,(([a-zA-Z0-9_-]*):(true|false)))*$;` +
		`viodiskcache=^(none|writeback|writethrough)$;mdev_type=^[^,](,?[0-9A-Za-z_-]+)+$;hugepages=^[0-9]+$;` +
		`scsi_hostdev=^(scsi_generic|scsi_block|scsi_hd|virtio_blk_pci)$;nvram_template=^.*$;` +
		`extra_cpu_flags=^([+-]?[a-zA-Z0-9_-]+)(,[+-]?[a-zA-Z0-9_-]+)*$`
	predefinedVMProperties45 = `sap_agent=^(true|false)$;sndbuf=^[0-9]+$;` +
		`vhost=^(([a-zA-Z0-9_-]*):(true|false))(,(([a-zA-Z0-9_-]*):(true|false)))*$;` +
		`viodiskcache=^(none|writeback|writethrough)$;hugepages=^[0-9]+$;` +
		`scsi_hostdev=^(scsi_generic|scsi_block|scsi_hd|virtio_blk_pci)$;nvram_template=^.*$;` +
		`extra_cpu_flags=^([+-]?[a-zA-Z0-9_-]+)(,[+-]?[a-zA-Z0-9_-]+)*$`
)

// DefaultPredefinedVMProperties is the Engine's PredefinedVMProperties for the given engine
// version ("4.4", "4.5.5", ...) at the cluster level the simulator's clusters have.
func DefaultPredefinedVMProperties(version string) string {
	v, err := parseVersion(version)
	if err == nil && v.minor <= 4 {
		return predefinedVMProperties44
	}
	return predefinedVMProperties45
}

// mdevTypeProperty is MDevTypesUtils.DEPRECATED_CUSTOM_PROPERTY_NAME.
const mdevTypeProperty = "mdev_type"

// The Engine's custom property grammar (CustomPropertiesUtils): names of [a-z_A-Z0-9], values
// without ';', "name=value" pairs separated by ';', a final ';' allowed.
var (
	customPropsSyntax = regexp.MustCompile(`^(?:[a-z_A-Z0-9]+=[^;]*(?:;[a-z_A-Z0-9]+=[^;]*)*;?)?$`)
	anyValueRegex     = `([^;])*` // CustomPropertiesUtils.VALUE_REGEX: a property defined without a regex
)

// vmPropertyConfig is the Engine's PredefinedVMProperties and UserDefinedVMProperties of the
// simulator's cluster level, parsed as VmPropertiesUtils.init parses them.
type vmPropertyConfig struct {
	regex                map[string]*regexp.Regexp
	isPredefined, isUser map[string]bool
}

// newVMPropertyConfig parses the configuration values; an empty predefined one means the
// Engine's default for the version. A regex Go cannot compile (RE2 has no look-around or
// back-references) is an error.
func newVMPropertyConfig(predefined, userDefined string, v engineVersion) (*vmPropertyConfig, error) {
	if predefined == "" {
		predefined = predefinedVMProperties45
		if v.minor <= 4 {
			predefined = predefinedVMProperties44
		}
	}
	c := &vmPropertyConfig{regex: map[string]*regexp.Regexp{}, isPredefined: map[string]bool{}, isUser: map[string]bool{}}
	for _, part := range []struct {
		value string
		set   map[string]bool
		what  string
	}{{predefined, c.isPredefined, "predefined_vm_properties"}, {userDefined, c.isUser, "user_defined_vm_properties"}} {
		for _, def := range javaSplit(part.value, ";") {
			name, re, found := strings.Cut(def, "=")
			if !found {
				re = anyValueRegex
			}
			rx, err := regexp.Compile(`^(?:` + re + `)$`)
			if err != nil {
				return nil, invalidf("%s: property %q: regex %q: %v", part.what, name, re, err)
			}
			part.set[name] = true
			c.regex[name] = rx // user-defined after predefined: its regex wins (putAll order)
		}
	}
	return c, nil
}

// javaSplit is Java's String.split(sep) for a literal one-character separator: trailing empty
// strings are dropped, and "" splits into nothing.
func javaSplit(s, sep string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, sep)
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// customProp is one property of a VM, as the Engine answers it.
type customProp struct{ name, value string }

// CustomProperty is a VM or template custom property (name and value).
type CustomProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// customPropsString is CustomPropertiesParser.parse(List): "name=value;" for every property
// with both a name and a value.
func customPropsString(sl *ovirtsdk.CustomPropertySlice) string {
	var b strings.Builder
	if sl == nil {
		return ""
	}
	for _, p := range sl.Slice() {
		name, okName := p.Name()
		value, okValue := p.Value()
		if okName && okValue {
			b.WriteString(name + "=" + value + ";")
		}
	}
	return b.String()
}

// orderedProps is a java.util.LinkedHashMap of properties: insertion order, a name put again
// keeps its place and takes the new value.
type orderedProps []customProp

func (o *orderedProps) put(name, value string) {
	for i := range *o {
		if (*o)[i].name == name {
			(*o)[i].value = value
			return
		}
	}
	*o = append(*o, customProp{name, value})
}

// convertProps is CustomPropertiesUtils.convertProperties(String): it fails (ok false) where
// the Engine's pairParts[1] throws, on a part without '='.
func convertProps(s string) (orderedProps, bool) {
	var out orderedProps
	for _, part := range javaSplit(s, ";") {
		name, value, found := strings.Cut(part, "=")
		if !found {
			return nil, false
		}
		out.put(name, value)
	}
	return out, true
}

// joinProps is CustomPropertiesUtils.convertProperties(Map): "name=value;..." without a final ';'.
func joinProps(ps []customProp) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.name + "=" + p.value
	}
	return strings.Join(parts, ";")
}

// validateProps is VmPropertiesUtils.validateVmProperties(version, String, messages) followed by
// handleCustomPropertiesError: nil when valid, else the validation messages (after the action
// and type). The Engine lists several keys of one reason in HashSet order (ValidationError
// hashes its enum by identity: not stable); the simulator lists them in request order.
func (c *vmPropertyConfig) validateProps(s string) []string {
	if !customPropsSyntax.MatchString(s) {
		return []string{"ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_SYNTAX"}
	}
	props, _ := convertProps(s) // the syntax guarantees a '=' in every part
	var missing, wrong []string
	for _, p := range props {
		rx, ok := c.regex[p.name]
		switch {
		case !ok:
			missing = append(missing, p.name)
		case !rx.MatchString(p.value):
			wrong = append(wrong, p.name)
		}
	}
	var msgs []string
	if len(missing) > 0 {
		msgs = append(msgs, "ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_KEYS", "$MissingKeys "+strings.Join(missing, ","))
	}
	if len(wrong) > 0 {
		msgs = append(msgs, "ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_VALUES", "$WrongValueKeys "+strings.Join(wrong, ","))
	}
	return msgs
}

// stored is what the Engine keeps of a valid properties string and answers later:
// predefined + ";" + user-defined, each rebuilt from a java.util.HashMap (a name in both
// configuration values is in both parts).
func (c *vmPropertyConfig) stored(s string) []customProp {
	props, _ := convertProps(s)
	var pre, user []customProp
	for _, p := range props {
		if c.isPredefined[p.name] {
			pre = append(pre, p)
		}
		if c.isUser[p.name] {
			user = append(user, p)
		}
	}
	return append(javaHashMapPropOrder(pre), javaHashMapPropOrder(user)...)
}

// javaStringHash is String.hashCode (over UTF-16 code units).
func javaStringHash(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return h
}

// javaHashMapPropOrder is the iteration order of a java.util.HashMap<String, String> holding
// ps (inserted in that order): by bucket of the spread hash, then insertion order.
func javaHashMapPropOrder(ps []customProp) []customProp {
	capacity := uint32(16)
	for float64(len(ps)) > 0.75*float64(capacity) {
		capacity *= 2
	}
	bucket := func(p customProp) uint32 {
		h := javaStringHash(p.name)
		return (h ^ h>>16) & (capacity - 1)
	}
	out := append([]customProp(nil), ps...)
	// Stable by bucket: insertion order within a bucket, as HashMap's chains (and resizes) keep it.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && bucket(out[j-1]) > bucket(out[j]); j-- {
			out[j-1], out[j] = out[j], out[j-1]
		}
	}
	return out
}

// propsString is the stored properties as the Engine's string (VmBaseDao: predefined;user).
func propsString(ps []customProp) string { return joinProps(ps) }

// propValue returns a property's value (the first of that name), "" and false without one.
func propValue(ps []customProp, name string) (string, bool) {
	for _, p := range ps {
		if p.name == name {
			return p.value, true
		}
	}
	return "", false
}

// customPropsOf maps a request's properties string onto what the command validates: on 4.5 the
// deprecated mdev_type is removed first (AddVmCommand/UpdateVmCommand.init). A string the
// Engine's convertProperties cannot split fails there, before any validation: the command is
// never built and the REST layer answers 500 (approx. detail).
func customPropsOf(s string, v engineVersion) (string, *apiError) {
	if v.minor <= 4 {
		return s, nil
	}
	props, ok := convertProps(s)
	if !ok {
		return "", &apiError{500, reasonFailed, "Internal Engine Error: the command could not be created (a custom property name or value contains ';')."}
	}
	for i, p := range props {
		if p.name == mdevTypeProperty {
			props = append(props[:i:i], props[i+1:]...)
			return joinProps(props), nil
		}
	}
	return s, nil
}

// customPropsFault is the fault of invalid custom properties for an action ("VAR__ACTION__ADD").
func customPropsFault(action string, msgs []string) *apiError {
	return engineFault(append([]string{action, "VAR__TYPE__VM"}, msgs...)...)
}

// renderCustomProps answers the stored properties as VmBaseMapper does
// (CustomPropertiesParser.parse(String, false)), nil without any.
func renderCustomProps(ps []customProp) *ovirtsdk.CustomPropertySlice {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*ovirtsdk.CustomProperty, 0, len(ps))
	for _, p := range ps {
		o := &ovirtsdk.CustomProperty{}
		o.SetName(esc(p.name))
		o.SetValue(esc(p.value))
		out = append(out, o)
	}
	sl := &ovirtsdk.CustomPropertySlice{}
	sl.SetSlice(out)
	return sl
}

// templateProps validates a seed template's custom properties with the Engine's rules.
func (c *vmPropertyConfig) templateProps(name string, ps []CustomProperty) ([]customProp, error) {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Name + "=" + p.Value + ";")
	}
	if msgs := c.validateProps(b.String()); msgs != nil {
		return nil, invalidf("template %q: custom properties: %s", name, customPropsFault("VAR__ACTION__ADD", msgs).detail)
	}
	return c.stored(b.String()), nil
}

func init() {
	for k, v := range map[string]string{
		"ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_SYNTAX": "Cannot ${action} ${type} if custom properties are in invalid format. Please check the input.",
		"ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_KEYS":   "Cannot ${action} ${type} if some of the specified custom properties are not configured by the system. The keys are: ${MissingKeys}",
		"ACTION_TYPE_FAILED_INVALID_CUSTOM_PROPERTIES_INVALID_VALUES": "Cannot ${action} ${type} if some of the specified custom properties have illegal values. The keys are: ${WrongValueKeys}",
	} {
		engineTexts[k] = v
		engineErrorTypes[k] = 400 // BAD_PARAMETERS
	}
}

// WithVMProperties sets the Engine's PredefinedVMProperties ("" keeps the Engine's default for
// the version) and UserDefinedVMProperties, both "name=regex;name=regex" as engine-config
// takes them.
func (b *Builder) WithVMProperties(predefined, userDefined string) *Builder {
	b.seed.PredefinedVMProperties, b.seed.UserDefinedVMProperties = predefined, userDefined
	return b
}
