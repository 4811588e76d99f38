@main struct VideoClient { static func main() {} }
