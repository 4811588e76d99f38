@main struct Load { static func main() {} }
