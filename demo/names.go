package demo

var (
	firstNames = [...]string{"Ada", "Bo", "Cleo", "Dax", "Eli", "Fay", "Gus", "Hana", "Ines", "Jax", "Kai", "Lea",
		"Milo", "Nia", "Oskar", "Pia", "Quinn", "Rey", "Sami", "Tove", "Uma", "Vik", "Wren", "Xia", "Yuki", "Zed"}
	lastNames = [...]string{"Falcon", "Vortex", "Ember", "Quartz", "Nimbus", "Raven", "Comet", "Cobalt", "Onyx",
		"Pixel", "Rocket", "Tundra", "Saber", "Echo", "Blaze", "Frost", "Orbit", "Drift", "Volt", "Zephyr"}
)

// playerName returns the display name of simulated player i of a board (kind tells the boards apart). It
// depends only on its arguments, so a restarted demo keeps every player's name. Like real display names they
// are not unique (the player id is).
func playerName(kind, i int) *string {
	h := uint64(i)*0x9e3779b97f4a7c15 + uint64(kind)*0xbf58476d1ce4e5b9
	h ^= h >> 29
	h *= 0x94d049bb133111eb
	h ^= h >> 32
	n := firstNames[h%uint64(len(firstNames))] + " " + lastNames[(h/uint64(len(firstNames)))%uint64(len(lastNames))]
	return &n
}
